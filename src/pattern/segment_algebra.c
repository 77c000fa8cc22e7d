/* segment_algebra.c — canonical affine segments and exact union / intersection /
 * clipping of sorted segment lists, the fast path of row evaluation. Anything that
 * cannot be expressed exactly (sparse segments on different lattices overlapping)
 * reports failure so the caller evaluates the row as bits instead. */
#include "pattern/pattern_impl.h"

static inline int is_range(splat__segment s) {
  return s.stride == 1;
}
static inline int64_t seg_last(splat__segment s) {
  return splat__segment_last(s);
}
/* Start of the last run. */
static inline int64_t last_run(splat__segment s) {
  return (int64_t)s.start + (int64_t)(s.count - 1) * s.stride;
}

int splat__segment_contains(splat__segment s, int64_t j) {
  if (j < s.start || j > splat__segment_last(s)) return 0;
  if (s.stride == 1) return 1;
  return (j - s.start) % s.stride < s.width;
}

splat__segment splat__seg_canon(int64_t start, int64_t stride, int64_t count, int64_t width) {
  splat__segment s;
  if (count == 1 || width >= stride) {
    int64_t len = (count - 1) * stride + width;
    s.start = (int32_t)start, s.stride = 1, s.count = (int32_t)len, s.width = 1;
  } else {
    s.start = (int32_t)start, s.stride = (int32_t)stride, s.count = (int32_t)count;
    s.width = (int32_t)width;
  }
  return s;
}

int splat__seg_push(splat__segment *out, int n, int cap, splat__segment s) {
  if (n > 0) {
    splat__segment *l = &out[n - 1];
    if (is_range(*l)) {
      if (is_range(s) && s.start == seg_last(*l) + 1) {
        l->count += s.count;
        return n;
      }
      /* A range that is exactly one run of the next sparse segment's lattice. */
      if (!is_range(s) && l->count == s.width && (int64_t)s.start - l->start == s.stride) {
        l->stride = s.stride, l->width = s.width, l->count = s.count + 1;
        return n;
      }
    } else if ((int64_t)s.start == (int64_t)l->start + (int64_t)l->count * l->stride) {
      if (is_range(s) && s.count == l->width) {
        l->count += 1;
        return n;
      }
      if (!is_range(s) && s.stride == l->stride && s.width == l->width) {
        l->count += s.count;
        return n;
      }
    }
  }
  if (n >= cap) return -1;
  out[n] = s;
  return n + 1;
}

int splat__seg_push_clipped(splat__segment *out, int n, int cap, int64_t o, int64_t d, int64_t cnt,
                            int64_t w, int64_t lo, int64_t hi) {
  if (cnt <= 0 || w <= 0 || lo > hi) return n;
  if (cnt == 1 || w >= d) { /* contiguous */
    int64_t a = imax(o, lo), b = imin(o + (cnt - 1) * d + w - 1, hi);
    if (a > b) return n;
    return splat__seg_push(out, n, cap, splat__seg_canon(a, 1, b - a + 1, 1));
  }
  /* Runs t0..t1 touch [lo, hi]. */
  int64_t t0 = imax(0, cdiv(lo - o - w + 1, d));
  int64_t t1 = imin(cnt - 1, fdiv(hi - o, d));
  if (t0 > t1) return n;
  if (t0 == t1) {
    int64_t a = imax(o + t0 * d, lo), b = imin(o + t0 * d + w - 1, hi);
    return splat__seg_push(out, n, cap, splat__seg_canon(a, 1, b - a + 1, 1));
  }
  int tail = 0;
  int64_t tail_a = 0, tail_b = 0;
  if (o + t0 * d < lo) { /* partial first run */
    n = splat__seg_push(out, n, cap, splat__seg_canon(lo, 1, o + t0 * d + w - lo, 1));
    if (n < 0) return -1;
    t0++;
  }
  if (o + t1 * d + w - 1 > hi) { /* partial last run */
    tail = 1, tail_a = o + t1 * d, tail_b = hi;
    t1--;
  }
  if (t0 <= t1) {
    n = splat__seg_push(out, n, cap, splat__seg_canon(o + t0 * d, d, t1 - t0 + 1, w));
    if (n < 0) return -1;
  }
  if (tail) n = splat__seg_push(out, n, cap, splat__seg_canon(tail_a, 1, tail_b - tail_a + 1, 1));
  return n;
}

static inline int push_clipped_seg(splat__segment *out, int n, int cap, splat__segment s,
                                   int64_t lo, int64_t hi) {
  return splat__seg_push_clipped(out, n, cap, s.start, s.stride, s.count, s.width, lo, hi);
}

/* Same lattice: equal stride and width and equal start modulo the stride. */
static inline int same_lattice(splat__segment a, splat__segment b) {
  return a.stride == b.stride && a.width == b.width && ((int64_t)a.start - b.start) % a.stride == 0;
}

/* The first piece of list[*idx..] at or after column pos, advancing *idx past
 * exhausted segments: a segment itself, a range cut at pos, a partial run as a range,
 * or the runs after pos. Returns 0 when the list is exhausted. */
static inline int front(const splat__segment *list, int n, int *idx, int64_t pos,
                        splat__segment *out) {
  while (*idx < n && seg_last(list[*idx]) < pos) (*idx)++;
  if (*idx >= n) return 0;
  const splat__segment s = list[*idx];
  if (s.start >= pos) {
    *out = s;
  } else if (is_range(s)) {
    *out = splat__seg_canon(pos, 1, seg_last(s) - pos + 1, 1);
  } else {
    int64_t t = (pos - s.start) / s.stride, rs = s.start + t * s.stride;
    if (pos < rs + s.width) {
      *out = splat__seg_canon(pos, 1, rs + s.width - pos, 1);
    } else {
      *out = splat__seg_canon(rs + s.stride, s.stride, s.count - t - 1, s.width);
    }
  }
  return 1;
}

/* Union of two lists of ranges: a merge of intervals. */
static int union_ranges(const splat__segment *a, int na, const splat__segment *b, int nb,
                        splat__segment *out, int cap) {
  int ia = 0, ib = 0, n = 0;
  while (ia < na || ib < nb) {
    splat__segment x = (ib >= nb || (ia < na && a[ia].start <= b[ib].start)) ? a[ia++] : b[ib++];
    if (n > 0 && (int64_t)x.start <= (int64_t)out[n - 1].start + out[n - 1].count) {
      int64_t e = imax((int64_t)out[n - 1].start + out[n - 1].count, (int64_t)x.start + x.count);
      out[n - 1].count = (int32_t)(e - out[n - 1].start);
    } else {
      if (n >= cap) return -1;
      out[n++] = x;
    }
  }
  return n;
}

/* One sparse segment s and one range r (strided | window, dilated | global, ...): s's
 * columns before r, r, s's columns after r — the pieces the sweep below emits, in the
 * same order, without its per-step fronts (a quarter of the analysis of such patterns). */
static int union_sparse_range(splat__segment s, splat__segment r, splat__segment *out, int cap) {
  int n = push_clipped_seg(out, 0, cap, s, s.start, (int64_t)r.start - 1);
  if (n >= 0) n = splat__seg_push(out, n, cap, r);
  if (n >= 0) n = push_clipped_seg(out, n, cap, s, seg_last(r) + 1, seg_last(s));
  return n;
}

/* A left-to-right sweep: pos is the first column not yet decided; each step emits
 * the next piece of the union from the fronts of both lists. */
int splat__seg_union(const splat__segment *a, int na, const splat__segment *b, int nb,
                     splat__segment *out, int cap) {
  if (na == 1 && nb == 1 && is_range(a[0]) != is_range(b[0])) {
    return is_range(a[0]) ? union_sparse_range(b[0], a[0], out, cap)
                          : union_sparse_range(a[0], b[0], out, cap);
  }
  int ia = 0, ib = 0, n = 0, ranges = 1;
  for (int t = 0; t < na; t++) ranges &= a[t].stride == 1;
  for (int t = 0; t < nb; t++) ranges &= b[t].stride == 1;
  if (ranges) return union_ranges(a, na, b, nb, out, cap);
  int64_t pos = 0;
  for (;;) {
    splat__segment fa = {0}, fb = {0}, x, y; /* front() fills them when it finds one */
    const int ha = front(a, na, &ia, pos, &fa), hb = front(b, nb, &ib, pos, &fb);
    if (!ha && !hb) return n;
    if (!ha || !hb) {
      x = ha ? fa : fb;
      n = splat__seg_push(out, n, cap, x);
      if (n < 0) return -1;
      pos = seg_last(x) + 1;
      continue;
    }
    /* x: the front that starts first (on ties a range, the longer one), y: the other. */
    int a_first = fa.start < fb.start || (fa.start == fb.start && is_range(fa) &&
                                          (!is_range(fb) || seg_last(fa) >= seg_last(fb)));
    x = a_first ? fa : fb, y = a_first ? fb : fa;
    if (y.start > seg_last(x) || is_range(x)) {
      /* Disjoint, or x is a range covering y's columns up to its end. */
      n = splat__seg_push(out, n, cap, x);
      pos = seg_last(x) + 1;
    } else if (is_range(y)) {
      /* x's columns before the range y. */
      n = push_clipped_seg(out, n, cap, x, pos, (int64_t)y.start - 1);
      pos = y.start;
    } else if (same_lattice(x, y)) {
      /* Every lattice run from x.start to the first end is x's. */
      int64_t m = imin(seg_last(x), seg_last(y));
      n = push_clipped_seg(out, n, cap, x, pos, m);
      pos = m + 1;
    } else {
      return -1;
    }
    if (n < 0) return -1;
  }
}

/* Pushes a & b for two segments whose spans overlap. */
static int inter2(splat__segment *out, int n, int cap, splat__segment a, splat__segment b) {
  if (is_range(a)) return push_clipped_seg(out, n, cap, b, a.start, seg_last(a));
  if (is_range(b)) return push_clipped_seg(out, n, cap, a, b.start, seg_last(b));
  if (!same_lattice(a, b)) return -1;
  int64_t lo = imax(a.start, b.start), hi = imin(last_run(a), last_run(b));
  if (lo > hi) return n;
  return splat__seg_push(out, n, cap,
                         splat__seg_canon(lo, a.stride, (hi - lo) / a.stride + 1, a.width));
}

int splat__seg_intersect(const splat__segment *a, int na, const splat__segment *b, int nb,
                         splat__segment *out, int cap) {
  int ia = 0, ib = 0, n = 0;
  while (ia < na && ib < nb) {
    int64_t la = seg_last(a[ia]), lb = seg_last(b[ib]);
    if (la < b[ib].start) {
      ia++;
    } else if (lb < a[ia].start) {
      ib++;
    } else {
      n = inter2(out, n, cap, a[ia], b[ib]);
      if (n < 0) return -1;
      if (la < lb) {
        ia++;
      } else {
        ib++;
      }
    }
  }
  return n;
}

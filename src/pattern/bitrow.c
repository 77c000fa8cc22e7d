/* bitrow.c — rows as bitsets (uint64 words, bit j of word j/64): filling them from
 * segments, and compressing set bits back into canonical segments greedily. This is
 * the exact fallback of row evaluation and the segment path of explicit masks. */
#include "pattern/pattern_impl.h"

static inline int ctz64(uint64_t x) {
  return __builtin_ctzll(x);
}

void splat__bits_set_range(uint64_t *w, int64_t lo, int64_t hi) {
  if (lo > hi) return;
  int64_t wl = lo >> 6, wh = hi >> 6;
  uint64_t ml = ~(uint64_t)0 << (lo & 63);
  uint64_t mh = ~(uint64_t)0 >> (63 - (hi & 63));
  if (wl == wh) {
    w[wl] |= ml & mh;
    return;
  }
  w[wl] |= ml;
  for (int64_t k = wl + 1; k < wh; k++) w[k] = ~(uint64_t)0;
  w[wh] |= mh;
}

void splat__bits_set_segment(uint64_t *w, splat__segment s) {
  if (s.stride == 1) {
    splat__bits_set_range(w, s.start, (int64_t)s.start + s.count - 1);
  } else if (s.width == 1) {
    for (int64_t j = s.start, t = 0; t < s.count; t++, j += s.stride) {
      w[j >> 6] |= (uint64_t)1 << (j & 63);
    }
  } else {
    for (int64_t j = s.start, t = 0; t < s.count; t++, j += s.stride) {
      splat__bits_set_range(w, j, j + s.width - 1);
    }
  }
}

/* Greedy compression state: the segment being grown, as count runs of width columns
 * stride apart (stride meaningless while count == 1). */
typedef struct grow {
  int64_t start, stride, count, width;
} grow;

int splat__bits_compress(const uint64_t *w, int64_t nwords, splat__segment *out, int cap) {
  int n = 0;
  grow cur = {0, 0, 0, 0};
  int64_t k = 0;
  uint64_t word = nwords > 0 ? w[0] : 0;
  for (;;) {
    /* Next run start. */
    while (word == 0) {
      if (++k >= nwords) goto done;
      word = w[k];
    }
    int64_t s = k * 64 + ctz64(word);
    /* Run end e (exclusive): the first zero bit at or after s. */
    uint64_t inv = ~word & (~(uint64_t)0 << (s & 63));
    while (inv == 0 && ++k < nwords) inv = ~w[k];
    int64_t e;
    if (k >= nwords) {
      e = nwords * 64, word = 0;
    } else {
      e = k * 64 + ctz64(inv);
      word = w[k] & (~(uint64_t)0 << (e & 63));
    }
    int64_t len = e - s;
    if (cur.count == 1 && cur.width == len) {
      cur.stride = s - cur.start, cur.count = 2;
    } else if (cur.count >= 2 && cur.width == len && s == cur.start + cur.count * cur.stride) {
      cur.count++;
    } else {
      if (cur.count > 0) {
        if (n >= cap) return -1;
        out[n++] = splat__seg_canon(cur.start, cur.stride, cur.count, cur.width);
      }
      cur.start = s, cur.stride = 0, cur.count = 1, cur.width = len;
    }
  }
done:
  if (cur.count > 0) {
    if (n >= cap) return -1;
    out[n++] = splat__seg_canon(cur.start, cur.count == 1 ? 1 : cur.stride, cur.count, cur.width);
  }
  return n;
}

int64_t splat__bits_expand(const uint64_t *w, int64_t nwords, int32_t *out) {
  int64_t n = 0;
  for (int64_t k = 0; k < nwords; k++) {
    uint64_t x = w[k];
    while (x) {
      out[n++] = (int32_t)(k * 64 + ctz64(x));
      x &= x - 1;
    }
  }
  return n;
}

int64_t splat__bits_count(const uint64_t *w, int64_t nwords) {
  int64_t n = 0;
  for (int64_t k = 0; k < nwords; k++) n += __builtin_popcountll(w[k]);
  return n;
}

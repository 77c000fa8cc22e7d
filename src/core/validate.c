/* validate.c — argument checks shared by every operation. */
#include "core/validate.h"

#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"

/* "[2,3,97,64]" */
static const char *shape_text(const int64_t s[4], char *buf, size_t cap) {
  snprintf(buf, cap, "[%lld,%lld,%lld,%lld]", (long long)s[0], (long long)s[1], (long long)s[2],
           (long long)s[3]);
  return buf;
}

static int64_t numel(const splat_tensor *t) {
  return t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
}

/* Byte span [lo, hi) of a non-empty tensor. */
static void byte_span(const splat_tensor *t, intptr_t *lo, intptr_t *hi) {
  int64_t min_off = 0, max_off = 0;
  for (int d = 0; d < 4; d++) {
    int64_t reach = t->strides[d] * (t->shape[d] - 1);
    if (reach < 0)
      min_off += reach;
    else
      max_off += reach;
  }
  int64_t size = splat__dtype_size(t->dtype);
  *lo = (intptr_t)t->data + (intptr_t)(min_off * size);
  *hi = (intptr_t)t->data + (intptr_t)((max_off + 1) * size);
}

/* 1 when distinct indices of t map to distinct offsets (checked by sorting the
 * non-trivial dimensions by |stride| and requiring each to clear the ones below). */
static int non_overlapping(const splat_tensor *t) {
  int64_t st[4], sz[4];
  int n = 0;
  for (int d = 0; d < 4; d++) {
    if (t->shape[d] <= 1) continue;
    st[n] = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
    sz[n] = t->shape[d];
    n++;
  }
  for (int a = 1; a < n; a++) {
    for (int b = a; b > 0 && st[b] < st[b - 1]; b--) {
      int64_t ts = st[b], tz = sz[b];
      st[b] = st[b - 1], sz[b] = sz[b - 1];
      st[b - 1] = ts, sz[b - 1] = tz;
    }
  }
  int64_t reach = 0; /* largest offset the lower dimensions reach */
  for (int k = 0; k < n; k++) {
    if (st[k] <= reach) return 0;
    reach += st[k] * (sz[k] - 1);
  }
  return 1;
}

splat_status splat__check_tensor(const char *fn, const char *name, const splat_tensor *t,
                                 const int64_t shape[4], int dtype, int is_output) {
  char a[96], b[96];
  if (!t) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
  if (!splat_dtype_name(t->dtype)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s.dtype=%d is not a splat_dtype value", fn,
                       name, (int)t->dtype);
  }
  if (dtype != SPLAT__DTYPE_ANY && (int)t->dtype != dtype) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s.dtype=%s but %s is required", fn, name,
                       splat_dtype_name(t->dtype), splat_dtype_name((splat_dtype)dtype));
  }
  if (memcmp(t->shape, shape, sizeof t->shape) != 0) {
    /* ACSR values end in the row width W, which is not always the largest row nnz. */
    const int values = !strcmp(name, "scores") || !strcmp(name, "probs");
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s.shape=%s but the plan expects %s%s", fn,
                       name, shape_text(t->shape, a, sizeof a), shape_text(shape, b, sizeof b),
                       values && t->shape[3] != shape[3]
                           ? " (the last dimension is the row width W, splat_plan_row_width: the "
                             "largest row nnz, from 128 on rounded up to a multiple of 16)"
                           : "");
  }
  if (numel(t) == 0) return SPLAT_OK;
  if (!t->data) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s.data is NULL", fn, name);
  const int64_t size = splat__dtype_size(t->dtype);
  if ((uintptr_t)t->data % (uintptr_t)size != 0) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: %s.data=%p is not aligned to its %lld-byte %s elements", fn, name,
                       t->data, (long long)size, splat_dtype_name(t->dtype));
  }
  for (int d = 0; d < 4; d++) {
    int64_t s = t->strides[d];
    /* A batch or head dimension of extent 1 is only ever indexed at 0: its stride is unused
     * (a framework may leave any value there), so it is not range-checked. */
    if (d < 2 && t->shape[d] == 1) continue;
    if (s > ((int64_t)1 << 40) || s < -((int64_t)1 << 40)) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "%s: %s.strides[%d]=%lld is out of range (|stride| <= 2^40)", fn, name, d,
                         (long long)s);
    }
  }
  /* Offsets must stay far inside int64 (byte spans, kernel addressing): |stride| <= 2^40
   * over a dimension of 2^31 would not, and no memory is that large anyway. */
  __int128 reach = 0;
  for (int d = 0; d < 4; d++) {
    if (t->shape[d] <= 1) continue; /* unused stride, maybe INT64_MIN: no negation */
    reach += (__int128)(t->strides[d] < 0 ? -t->strides[d] : t->strides[d]) * (t->shape[d] - 1);
  }
  if (reach > (__int128)1 << 60) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: %s.strides=[%lld,%lld,%lld,%lld] over shape %s reach element %.3g "
                       "from the first; a tensor must lie within 2^60 elements",
                       fn, name, (long long)t->strides[0], (long long)t->strides[1],
                       (long long)t->strides[2], (long long)t->strides[3],
                       shape_text(t->shape, a, sizeof a), (double)reach);
  }
  if (is_output && !non_overlapping(t)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: output %s has strides [%lld,%lld,%lld,%lld] that make elements "
                       "overlap; outputs need one memory location per element",
                       fn, name, (long long)t->strides[0], (long long)t->strides[1],
                       (long long)t->strides[2], (long long)t->strides[3]);
  }
  return SPLAT_OK;
}

int splat__same_tensor(const splat_tensor *a, const splat_tensor *b) {
  if (a->data != b->data || a->dtype != b->dtype || memcmp(a->shape, b->shape, sizeof a->shape))
    return 0;
  for (int d = 0; d < 4; d++) /* a dimension of extent 1's stride is never used */
    if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return 0;
  return 1;
}

/* Whether some k_j in [lo_j, hi_j] (j < n) give sum k_j s_j == r; the s_j descending and
 * separated (each above what the ones after it reach), so at each step only the two
 * multiples of s_j nearest r can leave a remainder the rest can reach. */
static int reachable(__int128 r, const __int128 *s, const int64_t *lo, const int64_t *hi,
                     const __int128 *below, int n) {
  if (n == 0) return r == 0;
  __int128 k0 = r / s[0];
  for (__int128 k = k0 - 1; k <= k0 + 1; k++) {
    if (k < lo[0] || k > hi[0]) continue;
    const __int128 rest = r - k * s[0];
    if ((rest < 0 ? -rest : rest) <= below[0] &&
        reachable(rest, s + 1, lo + 1, hi + 1, below + 1, n - 1))
      return 1;
  }
  return 0;
}

/* 1 when a and b provably share no byte although their spans meet: same element size,
 * the same stride wherever both have a dimension (of size > 1), strides separated (each
 * above the reach of the smaller ones: no dimension folds into another), and no index
 * pair (i, j) with a's element i at b's element j. Covers tensors interleaved in one
 * buffer (q and out as alternate heads of a [B, S, 2H, D] array). 0 (unproven) otherwise. */
static int interleaved_disjoint(const splat_tensor *a, const splat_tensor *b) {
  const int64_t size = splat__dtype_size(a->dtype);
  if (size != splat__dtype_size(b->dtype)) return 0;
  const intptr_t gap = (intptr_t)b->data - (intptr_t)a->data;
  if (gap % size != 0) return 0;
  __int128 s[4], below[4];
  int64_t lo[4], hi[4];
  int n = 0;
  for (int d = 0; d < 4; d++) {
    const int64_t na = a->shape[d], nb = b->shape[d];
    if (na <= 1 && nb <= 1) continue;
    if (na > 1 && nb > 1 && a->strides[d] != b->strides[d]) return 0;
    const int64_t st = na > 1 ? a->strides[d] : b->strides[d];
    if (st == 0) return 0; /* a broadcast input: every index the same element */
    /* a's element i meets b's j where sum st (i - j) = gap: k = i - j in [1 - nb, na - 1],
     * negated for a negative stride. */
    int64_t l = 1 - nb, h = na - 1;
    if (st < 0) l = 1 - na, h = nb - 1;
    int m = n++; /* insertion by |stride|, descending */
    const __int128 as = st < 0 ? -(__int128)st : st;
    for (; m > 0 && s[m - 1] < as; m--) s[m] = s[m - 1], lo[m] = lo[m - 1], hi[m] = hi[m - 1];
    s[m] = as, lo[m] = l, hi[m] = h;
  }
  __int128 reach = 0;
  for (int j = n - 1; j >= 0; j--) {
    below[j] = reach;
    if (s[j] <= reach) return 0;
    reach += s[j] * (__int128)(hi[j] > -lo[j] ? hi[j] : -lo[j]);
  }
  return !reachable((__int128)(gap / size), s, lo, hi, below, n);
}

splat_status splat__check_disjoint(const char *fn, const char *out_name, const splat_tensor *out,
                                   const char *in_name, const splat_tensor *in) {
  if (numel(out) == 0 || numel(in) == 0) return SPLAT_OK;
  intptr_t olo, ohi, ilo, ihi;
  byte_span(out, &olo, &ohi);
  byte_span(in, &ilo, &ihi);
  if (olo < ihi && ilo < ohi && !interleaved_disjoint(out, in)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: %s overlaps %s in memory; an output must not alias an input or another "
                       "output",
                       fn, out_name, in_name);
  }
  return SPLAT_OK;
}

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
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s.shape=%s but the plan expects %s", fn,
                       name, shape_text(t->shape, a, sizeof a), shape_text(shape, b, sizeof b));
  }
  if (numel(t) == 0) return SPLAT_OK;
  if (!t->data) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s.data is NULL", fn, name);
  for (int d = 0; d < 4; d++) {
    int64_t s = t->strides[d];
    if (s > ((int64_t)1 << 40) || s < -((int64_t)1 << 40)) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "%s: %s.strides[%d]=%lld is out of range (|stride| <= 2^40)", fn, name, d,
                         (long long)s);
    }
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
  return a->data == b->data && a->dtype == b->dtype &&
         memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
         memcmp(a->strides, b->strides, sizeof a->strides) == 0;
}

splat_status splat__check_disjoint(const char *fn, const char *out_name, const splat_tensor *out,
                                   const char *in_name, const splat_tensor *in) {
  if (numel(out) == 0 || numel(in) == 0) return SPLAT_OK;
  intptr_t olo, ohi, ilo, ihi;
  byte_span(out, &olo, &ohi);
  byte_span(in, &ilo, &ihi);
  if (olo < ihi && ilo < ohi) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: %s overlaps %s in memory; an output must not alias an input or another "
                       "output",
                       fn, out_name, in_name);
  }
  return SPLAT_OK;
}

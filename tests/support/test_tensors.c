/* test_tensors.c — the strided test tensors (test_tensors.h). */
#include "support/test_tensors.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "support/test_helpers.h"

const char *const layout_name[L_COUNT] = {"contig", "bshd", "padded", "neg-head", "d-major"};

tens tens_make(splat_dtype dt, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int layout) {
  tens x;
  int64_t *s = x.t.strides;
  switch (layout) {
    case L_BSHD: /* memory [d0, d2, d1, d3] */
      s[3] = 1, s[1] = d3, s[2] = d1 * d3, s[0] = d2 * d1 * d3;
      break;
    case L_PAD: /* padded last dim and batch */
      s[3] = 1, s[2] = d3 + 3, s[1] = d2 * (d3 + 3), s[0] = d1 * d2 * (d3 + 3) + 5;
      break;
    case L_NEGHEAD: /* heads in reverse memory order */
      s[3] = 1, s[2] = d3, s[1] = -(d2 * d3), s[0] = d1 * d2 * d3;
      break;
    case L_DMAJOR: /* last dim strided by the sequence */
      s[2] = 1, s[3] = d2, s[1] = d2 * d3, s[0] = d1 * d2 * d3;
      break;
    default:
      s[3] = 1, s[2] = d3, s[1] = d2 * d3, s[0] = d1 * d2 * d3;
      break;
  }
  const int64_t dims[4] = {d0, d1, d2, d3};
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < 4; i++) {
    x.t.shape[i] = dims[i];
    if (s[i] < 0)
      lo += s[i] * (dims[i] - 1);
    else
      hi += s[i] * (dims[i] - 1);
  }
  x.elems = hi - lo + 1;
  x.min_off = lo;
  const size_t bytes = (size_t)x.elems * (size_t)splat__dtype_size(dt);
  x.base = xmalloc(bytes);
  memset(x.base, 0xFF, bytes); /* NaN in every dtype */
  x.t.dtype = dt;
  x.t.data = x.base + (-lo) * splat__dtype_size(dt);
  return x;
}

void tens_free(tens *x) {
  free(x->base);
}

int64_t toff(const splat_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * t->strides[0] + b * t->strides[1] + c * t->strides[2] + d * t->strides[3];
}

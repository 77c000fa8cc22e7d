/* softmax.cuh — row softmax on ACSR values: probs[n] = exp(scale * s[n] - m) / sum over
 * the row's entries n < nnz(i) (padding is never read or written), fp32 math.
 *
 * SPLAT_SOFTMAX_ROWS_NAME: one warp per row (rows are at most W long): pass 1 keeps an
 * online (max, sum) per lane over entries lane, lane+32, ..., in base-2 with log2(e)
 * folded into the scale, combined across the warp by shuffles; pass 2 writes
 * exp2(t - max) / sum. In place (probs == scores) is fine: each entry is read and then
 * written by the same thread. lse (optional) = natural log-sum-exp; an empty row gets
 * lse = -inf and nothing else. Rows: permuted positions [row_begin, row_begin + row_count).
 *
 * Prelude: SPLAT_SDT (scores), SPLAT_PDT (probs), SPLAT_ROW_WARPS, the kernel name. */

#include "common.cuh"

extern "C" __global__ void __launch_bounds__(SPLAT_ROW_WARPS * 32)
    SPLAT_SOFTMAX_ROWS_NAME(const splat_softmax_params P) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t pos = (int64_t)blockIdx.x * SPLAT_ROW_WARPS + warp;
  if (pos >= P.shape.row_count) return;
  const int64_t i = P.pat.perm[P.shape.row_begin + pos];
  const splat_row row = splat_row_of(P.pat, i);
  const int64_t BH = P.shape.batch * P.shape.heads;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    if (row.nnz == 0) {
      if (P.lse.data && lane == 0) ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] = SPLAT_NEG_INF;
      continue;
    }
    const int64_t so = splat_off(P.scores, b, h, i), po = splat_off(P.probs, b, h, i);
    float m = SPLAT_NEG_INF, l = 0.f;
    for (int64_t n = lane; n < row.nnz; n += 32) {
      const float t = splat_ld<SPLAT_SDT>(P.scores.data, so + n * P.scores.s3) * P.scale_log2;
      if (t > m) {
        l = l * exp2f(m - t) + 1.f;
        m = t;
      } else {
        l += exp2f(t - m);
      }
    }
    const float M = splat_warp_max(m);
    l = m == SPLAT_NEG_INF ? 0.f : l * exp2f(m - M);
    const float L = splat_warp_sum(l);
    const float inv = 1.f / L;
    for (int64_t n = lane; n < row.nnz; n += 32) {
      const float t = splat_ld<SPLAT_SDT>(P.scores.data, so + n * P.scores.s3) * P.scale_log2;
      splat_st<SPLAT_PDT>(P.probs.data, po + n * P.probs.s3, exp2f(t - M) * inv);
    }
    if (P.lse.data && lane == 0) {
      ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] = (M + log2f(L)) * SPLAT_LN2;
    }
  }
}
